"""Demo data and accounts for trying Marginalia locally (scripts/run.sh seeds them)."""
