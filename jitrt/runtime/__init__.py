"""Runtime: data containers, the Program, launch handles, the registry and adstack services."""
