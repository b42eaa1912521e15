"""`zkctl watch`: a live view of a cluster, driven by ZooKeeper watches.

model.py is the functional core (observations in, view state and timeline events out);
zk_source.py is the shell that reads ZooKeeper when a watch fires; session.py wires the
two together; screen.py lays out the terminal view; render_curses.py and render_plain.py
draw it; text.py escapes the control characters of text from outside (zkctl's text output
too).
"""
