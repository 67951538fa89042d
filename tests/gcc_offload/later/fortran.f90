! Fortran for tests/test_gcc_later.py: a module array declared target, libgfortran on the device.
module m
  implicit none
  integer, parameter :: n = 8
  real :: arr(n)
  !$omp declare target(arr)
contains
  subroutine fill()
    integer :: i
    !$omp target
    do i = 1, n
      arr(i) = sqrt(real(i*i))
    end do
    !$omp end target
  end subroutine
end module
program p
  use m
  call fill()
  !$omp target update from(arr)
  print '(8f5.1)', arr
end program
