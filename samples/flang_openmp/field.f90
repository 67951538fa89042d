! A module whose variables live on the device too (`declare target`), and a routine that
! updates them in target regions (flang 19 does not lower `distribute parallel do` yet).
module field
  implicit none
  integer, parameter :: n = 512
  real :: values(n)
  real :: factor = 1.5
  integer :: updates = 0
  !$omp declare target(values, factor, updates)
contains
  subroutine scale_values()
    integer :: i
    !$omp target
    do i = 1, n
      values(i) = values(i) * factor + real(mod(i, 7))
    end do
    !$omp end target
    !$omp target
    updates = updates + 1
    !$omp end target
  end subroutine scale_values
end module field
