from legacy_gpu_patch.cli import main

if __name__ == "__main__":
    main()
