"""What every layer uses: the exceptions, the strict converter, the sanitiser for agent text."""
