! The program of tests/test_inspect_matrix.py in Fortran: one target region (a kernel), a
! declare target function and variable, and a function of the host alone.
module m
  integer :: bias = 3
  !$omp declare target (bias)
contains
  integer function scale(x)
    !$omp declare target
    integer, value :: x
    scale = 2 * x + bias
  end function
  integer function host_only(x)
    integer, value :: x
    host_only = x - 1
  end function
end module

program p
  use m
  integer :: out(8), i
  !$omp target map(from: out)
  do i = 1, 8
    out(i) = scale(i)
  end do
  !$omp end target
  print *, host_only(out(8))
end program
