"""What every layer uses: the exceptions, the strict converter, values frozen all the way down,
the sanitiser for agent text."""
