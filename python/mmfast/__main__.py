import sys

from mmfast.cli import main

sys.exit(main())
