# The two commands. Both do their own set-up (scripts/setup.sh) on a fresh machine.
.PHONY: demo test setup

demo: setup  ## start a local cluster and watch its controller fail over
	.venv/bin/zkctl demo $(ARGS)

test:  ## lint, type-check and run every test against a real ZooKeeper
	scripts/test.sh $(ARGS)

setup:
	scripts/setup.sh
