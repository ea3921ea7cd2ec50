"""The command line: the only part of frpd that imports typer and rich."""
