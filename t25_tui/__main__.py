import sys

from t25_tui.cli import main

sys.exit(main())
