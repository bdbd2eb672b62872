"""netstack: protocol engines (sans-IO) and the machinery around them."""

__version__ = "0.1.0"
