"""Running the recipe's build: options and variables, the streaming runner, compile probes (verify)."""
