program main
  use field
  use omp_lib
  implicit none
  integer :: i
  do i = 1, n
    values(i) = real(i) / 8.0
  end do
  factor = 0.5
  !$omp target update to(values, factor, updates)
  call scale_values()
  call scale_values()
  !$omp target update from(values, updates)
  print '(a, f12.4)', 'sum of values:', sum(values)
  print '(a, f10.4)', 'values(100):', values(100)
  print '(a, i0)', 'updates: ', updates
  if (omp_is_initial_device()) print '(a)', 'target regions ran on: the host (host fallback)'
end program main
