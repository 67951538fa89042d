#define N 256
extern float grid[N], next[N];
#pragma acc declare create(grid, next)
void heat_steps(int steps);
float heat_sum(void);
