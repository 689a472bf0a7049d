from loadlint.cli import main

raise SystemExit(main())
