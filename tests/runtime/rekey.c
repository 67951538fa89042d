/* Tables that no constructor of ours registered (as a module's that reaches another module's
 * copy of the runtime), used through the API: each round copies table A or B over the same
 * address (another module's table where one went without a destructor), then THREADS
 * threads use it at once.  The registry tells the tables apart by their key (total_size and
 * meta_crc32), so each thread must get the message of the table now there.  TABLE_A and
 * TABLE_B: the two tables as initializers ({0x4f, 0x46, ...}), from the test.
 * Output: `<round> <thread>: <offlink_last_error()>` per round and thread. */
#define _GNU_SOURCE
#include <offlink.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#define THREADS 4
#define ROUNDS 5

static const unsigned char table_a[] = TABLE_A;
static const unsigned char table_b[] = TABLE_B;
static unsigned char live[sizeof table_a > sizeof table_b ? sizeof table_a : sizeof table_b]
    __attribute__((aligned(64)));
static pthread_barrier_t start;
static char answers[THREADS][600];

static void *use_table(void *arg) {
  char *answer = arg;
  pthread_barrier_wait(&start);
  offlink_target_name(live);
  const char *error = offlink_last_error();
  snprintf(answer, sizeof answers[0], "%s", error ? error : "(none)");
  return NULL;
}

int main(void) {
  pthread_barrier_init(&start, NULL, THREADS);
  for (int round = 0; round < ROUNDS; round++) {
    memset(live, 0, sizeof live);
    if (round % 2)
      memcpy(live, table_b, sizeof table_b);
    else
      memcpy(live, table_a, sizeof table_a);
    pthread_t threads[THREADS];
    for (int i = 0; i < THREADS; i++)
      if (pthread_create(&threads[i], NULL, use_table, answers[i]) != 0)
        return 1;
    for (int i = 0; i < THREADS; i++)
      pthread_join(threads[i], NULL);
    for (int i = 0; i < THREADS; i++)
      printf("%d %d: %s\n", round, i, answers[i]);
  }
  return 0;
}
