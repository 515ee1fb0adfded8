/* Validation server: answers the host's HELLO/RESET/STEP/BYE requests around edgernn_step(). */
#ifndef EDGERNN_SERVER_H
#define EDGERNN_SERVER_H

/* Serve until the host says BYE (returns 0) or the link is lost (returns 1). */
int edgernn_serve(void);

#endif
