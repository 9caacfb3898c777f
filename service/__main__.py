from service.cli.einmal import main

if __name__ == "__main__":  # not when a worker process (anyio.to_process) loads the parent's main module
    main()
