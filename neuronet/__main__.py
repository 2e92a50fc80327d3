from neuronet.cli import main

main()
