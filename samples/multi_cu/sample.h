#ifndef SAMPLE_H
#define SAMPLE_H
int op_add(int, int);
int op_sub(int, int);
int op_mul(int, int);
int ops_calls(void);
const char *ops_side(void);
extern double scale;
extern double weights[4];
extern int hits;
double weighted_sum(void);
int vec_calls(void);
#endif
