"""Stage 9, the command line: ``main`` parses arguments and calls the stages; ``render`` draws all terminal output.
"""
