/* dlopen, use and dlclose each library named on the command line, in turn: after each
 * dlclose no image of offlink's may stay mapped (memfd "offlink:<target>"). */
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

static int images_mapped(void) {
  FILE *f = fopen("/proc/self/maps", "r");
  char line[4096];
  int n = 0;
  while (f && fgets(line, sizeof line, f))
    n += strstr(line, "memfd:offlink:") != NULL;
  if (f)
    fclose(f);
  return n;
}

int main(int argc, char **argv) {
  for (int i = 1; i < argc; i++) {
    void *h = dlopen(argv[i], RTLD_NOW | RTLD_LOCAL);
    if (!h) {
      printf("error: %s\n", dlerror());
      return 1;
    }
    const char *(*report)(void) = (const char *(*)(void))dlsym(h, "cycle_report");
    const char *answer = report(); /* first: it loads the image */
    printf("%d: %s, images %s\n", i, answer, images_mapped() ? "mapped" : "none");
    dlclose(h);
    printf("%d: closed, images %s\n", i, images_mapped() ? "mapped" : "none");
  }
  return 0;
}
