# Open MPI settings for a unit on one machine (sourced by the parallel tests and drills; docs/parallel.md):
# root is allowed (containers), more ranks than cores are allowed, shared memory between the ranks without
# the single-copy mechanism (it needs ptrace rights that containers often lack).
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_rmaps_base_oversubscribe=1
export OMPI_MCA_btl=self,vader
export OMPI_MCA_btl_vader_single_copy_mechanism=none
MPIRUN_ARGS=(--oversubscribe)
