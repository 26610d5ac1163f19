from sofakafka.cli import main

raise SystemExit(main())
