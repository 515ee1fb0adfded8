from edgernn.cli.main import main

main()
