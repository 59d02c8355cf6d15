'use strict';

const EventEmitter = require('events');

let instances = 0;
var debug = false;

class TaskQueue extends EventEmitter {
  constructor(concurrency) {
    super();
    this.concurrency = concurrency;
    this.running = 0;
    this.queue = [];
    instances += 1;
  }

  push(task) {
    this.queue.push(task);
    process.nextTick(() => this.next());
    return this;
  }

  next() {
    if (this.running === 0 && this.queue.length === 0) {
      return this.emit('empty');
    }
    while (this.running < this.concurrency && this.queue.length) {
      const task = this.queue.shift();
      this.running += 1;
      task((err) => {
        if (err) {
          this.emit('error', err);
        }
        this.running -= 1;
        this.next();
      });
    }
  }
}

function delay(ms, value) {
  return (done) => setTimeout(() => {
    if (debug) console.log('done', value);
    done();
  }, ms);
}

function describe(state) {
  switch (state) {
    case 'empty':
      return 'nothing to do';
    default:
      return 'busy';
  }
}

const queue = new TaskQueue(2);
for (let i = 0; i < 5; i += 1) {
  queue.push(delay(10 * i, i));
}
queue.on('empty', () => console.log(describe('empty'), instances));

module.exports = { TaskQueue, delay };
