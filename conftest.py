"""What every test process shares, for both test trees (tests/ and plugins/prime-lora/tests/).

A suite started in the background of a non-interactive shell (`make test &`, nohup, some CI runners)
inherits SIGINT ignored, and every `prime` it starts would ignore the Ctrl-C the tests send (an
ignored signal stays ignored across exec; a caught one is reset to the default). Catching it here
gives each child the default disposition, as in a terminal.
"""

import signal

if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)
