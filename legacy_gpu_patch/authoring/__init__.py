"""Recipe authoring: write recipes the way the seed authors ported by hand (edit, rebuild, read the error, edit
again), with the quilt/StGit loop on top of the ledger: new-recipe, edit, refresh, check, build --until-clean."""
