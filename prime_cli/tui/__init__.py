"""The Textual browser of eval, GEPA and training runs (`prime eval tui`). Import `make_app` from
`prime_cli.tui.app`; this package itself imports nothing heavy."""
