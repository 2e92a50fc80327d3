"""Live trading: an expert advisor against a MetaTrader 5 terminal, paper by default."""
