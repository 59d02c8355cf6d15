using System;
using System.Collections.Generic;

namespace Example.Queue
{
interface IJob
{
    string Name { get; }
    void Run();
}

enum Priority { Low, Normal, High }

delegate void JobFinished(IJob job, TimeSpan took);

abstract class JobBase : IJob
{
    public abstract string Name { get; }
    public abstract void Run();
}

class PrintJob : JobBase
{
    private readonly string text;
    public PrintJob(string text) { this.text = text; }
    public override string Name => "print";
    public override void Run() => Console.WriteLine(text);
}

public class Scheduler
{
    public event JobFinished Finished;
    private readonly SortedDictionary<Priority, Queue<IJob>> queues = new();

public void Add(IJob job, Priority priority = Priority.Normal)
{
    if (!queues.TryGetValue(priority, out var queue))
    {
        queue = new Queue<IJob>();
        queues[priority] = queue;
    }
    queue.Enqueue(job);
}

public int RunAll()
{
    var count = 0;
    foreach (var priority in new[] { Priority.High, Priority.Normal, Priority.Low })
    {
        if (!queues.TryGetValue(priority, out var queue))
        continue ;
        while (queue.Count > 0)
        {
            var job = queue.Dequeue();
            var started = DateTime.UtcNow;
try {
    job.Run();
}
catch (Exception error) {
    Console.Error.WriteLine($"{job.Name} failed: {error.Message}");
}
finally {
    Finished?.Invoke(job, DateTime.UtcNow - started);
}
            count++;
        }
    }
return count;
}
}
}
