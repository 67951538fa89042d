#ifndef BS_H
#define BS_H
int scale_by(int x);
const char *side(void);
extern int factor;
#endif
