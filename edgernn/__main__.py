from edgernn.cli import main

main()
