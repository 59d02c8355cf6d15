/* A ring buffer of bytes, with a small self-test. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct ring {
    unsigned char *data;
    size_t size, head, tail, count;
};

int ring_init(struct ring *r, size_t size)
{
    r->data = malloc(size);
    if (r->data == NULL)
        return -1;
    r->size = size;
    r->head = r->tail = r->count = 0;
    return 0;
}

void ring_free(struct ring *r)
{
    free(r->data);
    r->data = NULL;
}

int ring_put(struct ring *r, unsigned char byte)
{
    if (r->count == r->size)
        return -1;
    r->data[r->head] = byte;
    r->head = (r->head + 1) % r->size;
    r->count++;
    return 0;
}

int ring_get(struct ring *r, unsigned char *byte)
{
    if (r->count == 0)
        return -1;
    *byte = r->data[r->tail];
    r->tail = (r->tail + 1) % r->size;
    r->count--;
    return 0;
}

double ring_fill_ratio(const struct ring *r)
{
    return r->size ? (double)r->count / (double)r->size : 0.0;
}

int main(void)
{
    struct ring r;
    unsigned char b;
    if (ring_init(&r, 4) != 0) {
        fprintf(stderr, "out of memory\n");
        return 1;
    }
    for (int i = 0; i < 6; i++)
        if (ring_put(&r, (unsigned char)i) != 0)
            printf("full at %d (%.2f)\n", i, ring_fill_ratio(&r));
    while (ring_get(&r, &b) == 0)
        printf("got %u\n", b);
    switch (r.count) {
    case 0:
        puts("empty");
        break;
    default:
        puts("not empty");
    }
    ring_free(&r);
    return 0;
}
