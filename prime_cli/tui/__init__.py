"""The Textual browser of eval and GEPA runs (`prime eval tui`). Import `make_app` from
`prime_cli.tui.app`; this package itself imports nothing heavy."""
