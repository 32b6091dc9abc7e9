"""Entry point for ``python -m bot``."""

from bot.cli.main import main

raise SystemExit(main())
