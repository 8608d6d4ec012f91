print("jobtop")
