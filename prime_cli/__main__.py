from prime_cli.cli.main import main

main()
