"""The `irscope` command (irscope/cli.py): the top of the house, above the web app and the service."""
