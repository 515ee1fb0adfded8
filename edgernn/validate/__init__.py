"""Stage 8, validation: run a build on its device, compare every byte with the oracle and the
float model, write report.json.
"""
