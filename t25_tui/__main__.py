import sys

from t25_tui.cli.main import main

sys.exit(main())
