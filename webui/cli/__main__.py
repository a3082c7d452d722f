import sys

from webui.cli import main

sys.exit(main())
