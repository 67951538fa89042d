/* Reserve the offload table as the link's reserve stage does (DESIGN.md, step 5): an
 * allocated read-only section of the exact table size, __OPENMP_TARGET__ (weak, hidden) at
 * its start.  The test writes the table into it after the link.  -DTABLE_SIZE=N. */
	.section .openmp_target,"a",@progbits
	.balign 64
	.weak __OPENMP_TARGET__
	.hidden __OPENMP_TARGET__
	.type __OPENMP_TARGET__, @object
	.size __OPENMP_TARGET__, TABLE_SIZE
__OPENMP_TARGET__:
	.zero TABLE_SIZE
	.section .note.GNU-stack,"",@progbits
