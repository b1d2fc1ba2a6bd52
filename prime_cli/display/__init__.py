"""How a running engine reports itself: the display protocol an eval and a GEPA search share (protocol.py:
plain lines, NDJSON events, the rich live panel). Each engine adds its own events in its own display
module. Below the engines and above runs: it imports only run statuses and `visible`."""
