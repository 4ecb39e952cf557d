"""``python -m hub.cli``: the ``acp-hub`` command."""

from hub.cli import main

raise SystemExit(main())
