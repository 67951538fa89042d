/* dlopen the library named by argv[1] (cycle.c's), use it, dlclose it, then read
 * offlink_last_error(): the library runs on the host (OFFLINK_TARGET=none) and the message
 * saying why must outlive it.  The runtime is this executable's (exported, the library binds
 * to it), so it stays while the library and its set-up module go. */
#include <dlfcn.h>
#include <offlink.h>
#include <stdio.h>

int main(int argc, char **argv) {
  void *h = argc > 1 ? dlopen(argv[1], RTLD_NOW | RTLD_LOCAL) : NULL;
  if (!h) {
    printf("error: %s\n", argc > 1 ? dlerror() : "no library");
    return 1;
  }
  const char *(*report)(void) = (const char *(*)(void))dlsym(h, "cycle_report");
  printf("answer: %s\n", report());
  dlclose(h);
  /* Read byte by byte here, in this (instrumented) program: AddressSanitizer sees each. */
  const char *error = offlink_last_error();
  char copy[600];
  size_t n = 0;
  for (; error && error[n] && n < sizeof copy - 1; n++)
    copy[n] = error[n];
  copy[n] = '\0';
  printf("error: %s\n", error ? copy : "(none)");
  return 0;
}
