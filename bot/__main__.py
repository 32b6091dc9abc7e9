"""Entry point for ``python -m bot``."""

from bot.cli import main

raise SystemExit(main())
