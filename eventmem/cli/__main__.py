import sys

from eventmem.cli import main

sys.exit(main())
