#ifndef SHAPE_H
#define SHAPE_H
double shape_area(double side);
extern int shape_version;
const char *shape_where(void);
const char *shape_where_on_target(void);
int shape_version_on_target(void);
#endif
