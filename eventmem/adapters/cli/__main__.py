import sys

from eventmem.main import main

sys.exit(main())
