program main
  use field
  implicit none
  integer :: i
  real(8) :: total
  do i = 1, n
    values(i) = real(i) / 8.0
  end do
  factor = 0.5
  !$omp target update to(values, factor, updates)
  call scale_values()
  call scale_values()
  !$omp target update from(values, updates)
  total = 0
  !$omp target map(tofrom: total)
  do i = 1, 100
    total = total + 2.0d0 * i
  end do
  !$omp end target
  print '(a, f12.4)', 'sum of values:', sum(values)
  print '(a, f10.4)', 'values(100):', values(100)
  print '(a, i0)', 'updates: ', updates
  print '(a, f10.1)', 'total: ', total
end program main
